"""The one encoder core and its heads."""

from encoderlab.nn.config import EncoderConfig
from encoderlab.nn.encoder import Encoder, EncoderOutput
from encoderlab.nn.heads import (
    ClassificationHead,
    MLMHead,
    RTDHead,
    SentencePairHead,
    TokenClassificationHead,
)

__all__ = [
    "ClassificationHead",
    "Encoder",
    "EncoderConfig",
    "EncoderOutput",
    "MLMHead",
    "RTDHead",
    "SentencePairHead",
    "TokenClassificationHead",
]
