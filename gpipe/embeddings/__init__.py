"""Vertex embeddings trained on walks where the workers hold them: word2vec's skip-gram with negative sampling."""

from ._result import Embeddings
from ._word2vec import word2vec

__all__ = ["Embeddings", "word2vec"]
