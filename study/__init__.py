"""vit-vs-cnn: when does a Vision Transformer beat a CNN, and why?

Data flows one way: ``params.yaml -> data -> subsets -> train -> runs/ -> analysis -> reports/``.
"""

__version__ = "0.1.0"
