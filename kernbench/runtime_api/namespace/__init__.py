"""The modules a bench sees: torch's factories, `torch.ahbm`, random, multiprocessing, and `import torch` in a run."""
