"""tl_aot's benchmark suite (issue 5): run on the GPU machine with ``python bench/run.py``; see README.md."""
