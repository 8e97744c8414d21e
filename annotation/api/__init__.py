"""The REST API's routes (``urls``); each feature's endpoints live in its own package."""
