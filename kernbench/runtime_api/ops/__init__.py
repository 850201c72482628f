"""The op table (one row per torch op) and the device ops that time and execute its rows."""
