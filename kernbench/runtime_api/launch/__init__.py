"""Programs launched on the PEs: grid placement, the port their ops go through, access plans, Triton's driver."""
