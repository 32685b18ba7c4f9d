"""LLM judge backends that need a model of their own: a local transformers judge, a local
OpenAI-compatible server, and the learned judge the package trains. They sit above the policy layer
(they load causal LMs with it); the model-free parts of LLM judging (question templates, verdict
parsing, grading) are in ``graders``."""

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".learned": ["LearnedJudgeGrader", "build_judge"],
    ".learned_paths": ["JudgeBuildConfig", "judge_path"],
    ".transformers_judge": ["TransformersJudge", "context_length", "judge_identity"],
})
