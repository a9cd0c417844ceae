/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A circular doubly linked list with the node inside the element, as in the kernel. */
#ifndef RDMAFS_LIST_I_H
#define RDMAFS_LIST_I_H

#include <stdbool.h>
#include <stddef.h>

struct list_head {
	struct list_head *next, *prev;
};

#define LIST_HEAD_INIT(name)     \
	{                        \
		&(name), &(name) \
	}

static inline void list_init(struct list_head *head)
{
	head->next = head;
	head->prev = head;
}

static inline bool list_empty(const struct list_head *head)
{
	return head->next == head;
}

static inline void list_insert_between(struct list_head *node, struct list_head *prev,
				       struct list_head *next)
{
	next->prev = node;
	node->next = next;
	node->prev = prev;
	prev->next = node;
}

static inline void list_add_head(struct list_head *node, struct list_head *head)
{
	list_insert_between(node, head, head->next);
}

static inline void list_add_tail(struct list_head *node, struct list_head *head)
{
	list_insert_between(node, head->prev, head);
}

/* Unlinks @node and leaves it pointing at itself, so a second delete is harmless. */
static inline void list_del(struct list_head *node)
{
	node->prev->next = node->next;
	node->next->prev = node->prev;
	list_init(node);
}

#define list_entry(ptr, type, member)	     ((type *)((char *)(ptr)-offsetof(type, member)))
#define list_first_entry(head, type, member) list_entry((head)->next, type, member)

#define list_for_each(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

#define list_for_each_safe(pos, tmp, head)                               \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif /* RDMAFS_LIST_I_H */
