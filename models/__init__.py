"""RSA network code: REM kernels, RSA attention, forecasters. Tensors in, tensors out; no I/O."""

from models.attention import RSAAttention
from models.config import ModelConfig
from models.forecaster import Covariates, RSAForecaster
from models.rem import build_rem

__all__ = ["Covariates", "ModelConfig", "RSAAttention", "RSAForecaster", "build_rem"]
