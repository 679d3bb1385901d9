"""Temporal operators (SPEC section 8): logical plan nodes and the machines that run them."""
