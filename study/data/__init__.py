"""Data: datasets as uint8 arrays (``datasets.load_dataset``), the prepared arrays, and the subsets.

Nothing is re-exported here: importing ``study.data.subsets`` in a training stage must not pay for
torchvision, which only the dataset readers need.
"""
