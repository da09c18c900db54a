package playground

import "github.com/rlctl/rlctl/dsl"

// Reference returns the short references of the policy language, in the order to read
// them: policy, scenario, plugins, each the text that rlctl help TOPIC prints. It is the
// playground's quick reference. The caller owns the result.
func Reference() []dsl.Topic {
	return dsl.Topics()
}
