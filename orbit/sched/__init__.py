"""Resources, leases, admission decisions and the tick that acts on them."""
