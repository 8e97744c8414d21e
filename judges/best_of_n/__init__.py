"""Best-of-N: a judge picking the best of N candidates per prompt (knockout or scores), its runs
and page; imports evaluation's scoring orders, roster and the kernel."""
