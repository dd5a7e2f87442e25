"""What starts runs without a click: landing-folder sensors and declarative automation."""
