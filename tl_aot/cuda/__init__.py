"""The CUDA compiler: which one, its commands, images and host objects."""
