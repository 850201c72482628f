"""`torch.utils.data`: datasets, samplers and the DataLoader, on the host as PyTorch runs them (ADR 0020)."""
