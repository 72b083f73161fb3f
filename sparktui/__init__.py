"""sparktui: run one vLLM model across several DGX Sparks and watch it from one screen."""

__version__ = "0.1.0"
