# sizer in a container: CUDA PyTorch runtime, fio, and the sizer package.
# Resource limits need the host's cgroups and GPUs; see README.md ("Docker") for the run flags.
FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fio \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/sizer
COPY pyproject.toml README.md ./
COPY sizer ./sizer
COPY workloads ./workloads
COPY reports ./reports
# torch and torchvision come with the base image; pip keeps them when they satisfy the ranges.
RUN pip install --no-cache-dir ".[torch]"

WORKDIR /work
ENTRYPOINT ["sizer"]
CMD ["--help"]
