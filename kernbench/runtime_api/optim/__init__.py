"""`torch.optim`: SGD, Adam and AdamW as device work over the parameters, and the learning-rate schedulers."""
