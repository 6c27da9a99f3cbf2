package run_test

// An independent Go model of the versioned_changes contract (README "Built-in
// pipelines": every input row gets one outcome, the first of
// invalid_change_id, invalid_entity_id, invalid_version, invalid_operation,
// invalid_payload, superseded_in_batch, accepted, stale, duplicate,
// conflict), written from the contract and not from the SQL: validation of
// one row, the batch rules that label every row, and an event-by-event fold
// of the valid rows. The tests compare the pipeline with both.

import (
	"sort"
	"strconv"
	"strings"
)

// Outcomes.
const (
	ocInvalidChangeID = "invalid_change_id"
	ocInvalidEntityID = "invalid_entity_id"
	ocInvalidVersion  = "invalid_version"
	ocInvalidOp       = "invalid_operation"
	ocInvalidPayload  = "invalid_payload"
	ocSuperseded      = "superseded_in_batch"
	ocAccepted        = "accepted"
	ocStale           = "stale"
	ocDuplicate       = "duplicate"
	ocConflict        = "conflict"
)

// Statuses of a stored row.
const (
	stActive   = "active"
	stDeleted  = "deleted"
	stConflict = "conflict"
)

// vcBlankSpace is what "blank" trims: ASCII white space. A string of only
// these characters (or none) is blank; other Unicode spaces are not.
const vcBlankSpace = " \t\n\v\f\r"

func vcIsBlank(p *string) bool { return p == nil || strings.Trim(*p, vcBlankSpace) == "" }

// vcParseVersion reads a source version: optional ASCII white space around an
// optional '+' and decimal digits that fit a BIGINT, greater than zero.
// Decimals, exponents, hex, underscores and signs other than a leading '+'
// are invalid.
func vcParseVersion(p *string) (int64, bool) {
	if p == nil {
		return 0, false
	}
	s := strings.Trim(*p, vcBlankSpace)
	s = strings.TrimPrefix(s, "+")
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 {
		return 0, false
	}
	return v, true
}

// vcValid is a row that passed validation.
type vcValid struct {
	entity  string
	version int64
	op      string
	value   *string
}

// payloadKey identifies the payload of a valid row: operation and value.
func (v vcValid) payloadKey() string {
	if v.value == nil {
		return v.op + "\x00null"
	}
	return v.op + "\x00=" + *v.value
}

// vcValidate returns the first rule the row fails, in the contract's order,
// or "" and the typed row.
func vcValidate(r vcText) (string, vcValid) {
	changeID, entity, version, op, value := r[0], r[1], r[2], r[3], r[4]
	if vcIsBlank(changeID) {
		return ocInvalidChangeID, vcValid{}
	}
	if vcIsBlank(entity) {
		return ocInvalidEntityID, vcValid{}
	}
	v, ok := vcParseVersion(version)
	if !ok {
		return ocInvalidVersion, vcValid{}
	}
	if op == nil || (*op != "upsert" && *op != "delete") {
		return ocInvalidOp, vcValid{}
	}
	if (*op == "upsert" && value == nil) || (*op == "delete" && value != nil) {
		return ocInvalidPayload, vcValid{}
	}
	return "", vcValid{entity: *entity, version: v, op: *op, value: value}
}

// vcModel is the state of every entity: the target as it must be.
type vcModel map[string]vcStored

func (m vcModel) clone() vcModel {
	out := make(vcModel, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// rows lists the state in entity order, as the target is read.
func (m vcModel) rows() []vcStored {
	out := make([]vcStored, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entity < out[j].Entity })
	return out
}

// activeRows lists the active entities in entity order.
func (m vcModel) activeRows() []vcStored {
	out := []vcStored{}
	for _, s := range m.rows() {
		if s.Status == stActive {
			out = append(out, s)
		}
	}
	return out
}

func vcStoredFor(v vcValid) vcStored {
	status := stActive
	if v.op == "delete" {
		status = stDeleted
	}
	return vcStored{Entity: v.entity, Version: v.version, Status: status, Value: v.value}
}

func vcSamePayload(s vcStored, v vcValid) bool {
	if s.Status == stConflict {
		return false
	}
	if (s.Status == stDeleted) != (v.op == "delete") {
		return false
	}
	if s.Value == nil || v.value == nil {
		return s.Value == nil && v.value == nil
	}
	return *s.Value == *v.value
}

// fold applies the valid rows of a batch one event at a time, in input
// order: a higher version replaces, a lower one is ignored, an equal one
// with another payload turns the row into a conflict with no value, and a
// conflict stays until a strictly higher version arrives.
func (m vcModel) fold(rows []vcText) vcModel {
	out := m.clone()
	for _, r := range rows {
		reason, v := vcValidate(r)
		if reason != "" {
			continue
		}
		cur, ok := out[v.entity]
		switch {
		case !ok || v.version > cur.Version:
			out[v.entity] = vcStoredFor(v)
		case v.version < cur.Version:
		case cur.Status == stConflict:
		case vcSamePayload(cur, v):
		default:
			out[v.entity] = vcStored{Entity: v.entity, Version: v.version, Status: stConflict}
		}
	}
	return out
}

// batchOutcomes labels every row of a batch by the batch rules, given the
// state before the batch, and returns the state after it:
//   - an invalid row gets the first rule it fails;
//   - a valid row below its entity's highest valid version in the batch is
//     superseded_in_batch;
//   - the rows at that highest version (exact repeats collapsed) form the
//     entity's candidate, a conflict when they hold distinct payloads;
//   - against the stored row: unknown or higher -> accepted (or conflict),
//     lower -> stale, equal -> duplicate when the payload matches a
//     non-conflict row, otherwise conflict.
func (m vcModel) batchOutcomes(rows []vcText) ([]string, vcModel) {
	out := m.clone()
	labels := make([]string, len(rows))
	valid := make([]vcValid, len(rows))
	top := map[string]int64{}
	for i, r := range rows {
		reason, v := vcValidate(r)
		labels[i] = reason
		valid[i] = v
		if reason == "" && v.version > top[v.entity] {
			top[v.entity] = v.version
		}
	}
	payloads := map[string]map[string]vcValid{}
	for i, v := range valid {
		if labels[i] != "" {
			continue
		}
		if v.version < top[v.entity] {
			labels[i] = ocSuperseded
			continue
		}
		if payloads[v.entity] == nil {
			payloads[v.entity] = map[string]vcValid{}
		}
		payloads[v.entity][v.payloadKey()] = v
	}
	decision := map[string]string{}
	for entity, ps := range payloads {
		version := top[entity]
		var only vcValid
		for _, p := range ps {
			only = p
		}
		conflict := len(ps) > 1
		cur, known := out[entity]
		switch {
		case !known || version > cur.Version:
			if conflict {
				decision[entity] = ocConflict
				out[entity] = vcStored{Entity: entity, Version: version, Status: stConflict}
			} else {
				decision[entity] = ocAccepted
				out[entity] = vcStoredFor(only)
			}
		case version < cur.Version:
			decision[entity] = ocStale
		case !conflict && vcSamePayload(cur, only):
			decision[entity] = ocDuplicate
		default:
			decision[entity] = ocConflict
			out[entity] = vcStored{Entity: entity, Version: version, Status: stConflict}
		}
	}
	for i := range labels {
		if labels[i] == "" {
			labels[i] = decision[valid[i].entity]
		}
	}
	return labels, out
}

// vcCountOutcomes counts labels by outcome.
func vcCountOutcomes(labels []string) map[string]int64 {
	out := map[string]int64{}
	for _, l := range labels {
		out[l]++
	}
	return out
}
