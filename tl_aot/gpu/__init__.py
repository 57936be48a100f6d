"""Facts about GPUs: arch names, launch limits, device profiles, the driver, CUDA compatibility."""
