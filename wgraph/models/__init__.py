"""Reference models built only from wgraph's public ops and Graph."""

from wgraph.errors import CheckpointError
from wgraph.models.checkpoint import Checkpoint
from wgraph.models.config import DecoderConfig, LlamaConfig, RopeScaling
from wgraph.models.llama import Llama
from wgraph.models.batched import BatchedDecoder
from wgraph.models.pretrained import PretrainedFiles, from_pretrained, open_pretrained
from wgraph.models.tokenizer import Tokenizer

__all__ = ["BatchedDecoder", "Checkpoint", "CheckpointError", "DecoderConfig", "Llama", "LlamaConfig", "PretrainedFiles", "RopeScaling",
           "Tokenizer", "from_pretrained", "open_pretrained"]
