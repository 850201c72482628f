"""The shipped collective algorithms, one module each, written as PE programs over IPCQ."""
