"""LLM judge backends that need a model of their own: a local transformers judge and a local
OpenAI-compatible server. They sit above the policy layer (they load causal LMs with it); the
model-free parts of LLM judging (question templates, verdict parsing, grading) are in ``graders``."""

from .transformers_judge import TransformersJudge, context_length, judge_identity

__all__ = ["TransformersJudge", "context_length", "judge_identity"]
