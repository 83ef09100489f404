"""The stages of the pretrained analysis's own DVC project (pretrained/dvc.yaml): ``study pretrained-<name>`` runs
``<name>.py`` here."""
