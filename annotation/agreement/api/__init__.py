"""Agreement over REST: the cached report and a curator's adjudication."""
