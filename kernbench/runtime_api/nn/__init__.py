"""`torch.nn`: `Module` and its containers, `Parameter`, the layers, activations and losses, `init` and `utils`."""
