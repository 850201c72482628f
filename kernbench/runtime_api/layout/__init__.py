"""Where a tensor's elements sit in its storage (strided views, boxes of rows) and the copies between storages."""
