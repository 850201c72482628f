"""`Tensor`: a view of a storage in simulated memory, with the op table's methods, and its moves between devices."""
