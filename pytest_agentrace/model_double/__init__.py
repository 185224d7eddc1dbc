"""The model double: a scripted local model server that real agent CLIs run against, offline.

- ``script``: model scripts (YAML): ``shell`` / ``write`` / ``text`` steps with usage, delays and faults;
- ``server``: ``ModelDouble``, one stateless HTTP server for the Anthropic, OpenAI Responses, OpenAI Chat and
  Gemini wire protocols, logging every request;
- ``tools``: reading requests and mapping steps onto the tools a CLI offered; ``wire``: the encoders;
- ``environment``: per-CLI offline settings (``offline_env``); ``netns``: ``--agentrace-offline``;
- ``cassette``: recorded traffic (``--agentrace-record``/``--agentrace-replay``) as JSON, its scrubbing and
  matching (``Replayer``); ``normalise``: the one table of what varies by machine and session (placeholders for
  paths and host facts, marks for ids and times), used when recording and when matching; ``recorder``: the
  recording proxy in front of a CLI's provider or an upstream URL;
- ``runs``: what the runner calls for an agent with ``model_double:``; ``fixtures``: the ``model_double``
  pytest fixture.

See ``../shared/design/model-double.md`` for what each CLI version needs. Import from the submodules
(``from pytest_agentrace.model_double.server import ModelDouble``); this package imports nothing.
"""
