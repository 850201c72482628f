"""Collectives: `ccl.yaml`, `torch.distributed`, and the collective algorithms written as PE programs over IPCQ."""
