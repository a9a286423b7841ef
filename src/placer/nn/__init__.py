"""Policy networks (the optional ``torch`` extra), one module per method family; docs/architecture.md maps them."""
