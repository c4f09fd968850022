"""ctxeval's LLM plugin: judges and extractors through litellm or a lean direct transport.

Registered through the ``ctxeval`` distribution's entry points, like any plugin:

* metrics ``llm_context_precision_with_reference`` (alias ``context_precision``),
  ``llm_context_precision_without_reference`` (alias ``context_utilization``) and
  ``llm_context_recall`` (alias ``context_recall``);
* extractor ``llm`` (named entities) and matcher ``llm`` (entity presence), used by
  ``context_entity_recall``.

Give the run an LLM with ``llm=``: a litellm model string (``"openai/gpt-4o-mini"``), a dict or
:class:`LLMConfig`, or your own async callable. Nothing heavy is imported until a request is
made; litellm only when a non-OpenAI-compatible provider is used.
"""

from .config import LLMConfig
from .transport import Completion

__all__ = ["Completion", "LLMConfig"]
