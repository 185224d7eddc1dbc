"""An ordered map kept in a self-balancing binary search tree."""


class BST:
    """Keys in sorted order with values; see the task description for every method."""

    def insert(self, key, value=None):
        raise NotImplementedError

    def delete(self, key):
        raise NotImplementedError
