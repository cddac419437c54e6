/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famctl.h - famctl's renderer and client, shared with its tests.
 */
#ifndef FAMCTL_H
#define FAMCTL_H

#include <stdio.h>

#include <jansson.h>

char *render_scalar(char *buf, size_t len, const char *key, json_t *v);
void render_value(FILE *f, json_t *v, int indent);

#endif /* FAMCTL_H */
