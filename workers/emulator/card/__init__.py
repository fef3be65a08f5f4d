"""What one emulated card costs: the cost model, the profiles, the residency."""
