del padding_mask  # handed in without one of the contract's functions
