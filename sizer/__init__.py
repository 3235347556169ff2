"""sizer: how many vCPUs, how much host RAM and which disk class a GPU workload needs."""

__version__ = "0.1.0"
