#!/usr/bin/env bash
# Set-up on the GPU machine (no network): wheels and a static fio carried from the dev host,
# sizer installed in place over the image's own PyTorch. Source this: it exports PATH/PYTHONPATH.
# usage: source lab/gpu/setup.sh    (from the repository root; wheels from .whl/ and fio from .deb/ where present)
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! command -v fio >/dev/null && [ -x .deb/fio-static ]; then
  mkdir -p /tmp/bin && cp .deb/fio-static /tmp/bin/fio && export PATH=/tmp/bin:$PATH
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/tmp/sizer-install.log 2>&1 \
  || { cat /tmp/sizer-install.log; echo "sizer install failed"; }
export PATH=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH
