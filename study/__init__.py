"""vit-vs-cnn: when does a Vision Transformer beat a CNN, and why?

Data flows one way: ``params.yaml -> data -> subsets -> train -> runs/ -> analysis -> reports/``. The version is
pyproject.toml's alone (:func:`study.core.version.study_version`), so that a new one makes no stage stale.
"""
