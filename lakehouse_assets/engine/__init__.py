"""The warm engine: a long-lived Spark Connect server that runs attach to.

``client`` builds the project's sessions of an engine (URL, token, a quick answer when none
listens); ``server`` starts, checks and stops the managed local engine (`lakehouse engine`);
``files`` says where the managed engine keeps its pid, token, settings and log.
"""
