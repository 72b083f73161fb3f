"""Config texts the tests share."""

#: The smallest valid config: two nodes, the first the head, and a model.
TWO_SPARKS = """
[[nodes]]
name = "spark1"
host = "spark1"
role = "head"

[[nodes]]
name = "spark2"
host = "spark2"

[engine]
model = "/models/m"
"""
