"""lightpath networks: graph builders, closed-form metrics, bills of materials, collectives."""
