"""A pandas client for the RSA forecasting service (docs/batch.md, "The Python client").

    from rsa_client import Client
    client = Client("http://127.0.0.1:8000")
    out = client.forecast(df, h=24, level=[80], model="etth1-rsa")

Installable on its own (`pip install ./rsa_core ./client`): pandas, numpy, httpx and rsa_core (the time
rules it shares with the service); nothing of the service.
"""

from rsa_client.client import Client, ModelLimits, ModelSpec, ServiceError, forecast_columns

__all__ = ["Client", "ModelLimits", "ModelSpec", "ServiceError", "forecast_columns"]
