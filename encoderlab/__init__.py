"""encoderlab: pretrain, fine-tune and compare compact transformer encoders (BERT, ALBERT, ELECTRA)."""

__version__ = "0.1.0"
