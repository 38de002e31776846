"""The frame's screens: the main screen (editor, status, host of the flows) and the side screens.

The side screens (Changes, the Assistant pane, Proposals, the mode switcher)
hold no reference to the main screen: what they ask of it they ask by message,
which the app routes. They load when first opened, not before the first paint.
"""
