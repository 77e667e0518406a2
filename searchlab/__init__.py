"""searchlab: the domain library of the pipeline (corpus, retrieval, synthesis, agent, training, evaluation).

This layer knows neither Prefect nor MLflow: every function takes its params
section and input paths explicitly and returns plain data.
"""

__version__ = "0.1.0"
