package policy

import "strings"

// Risk is the risk class a method declares (for plugin/v1, its port's
// method rule): what policy rules match with risk_classes. A method that
// declares none, and every Executa tool, is RiskUnspecified (matched by
// the entry "unspecified").
type Risk int

// Risk classes, from least to most consequential.
const (
	RiskUnspecified Risk = iota
	RiskRead
	RiskLow
	RiskWrite
	RiskPrivileged
)

// riskNames are the names evidence records carry (risk_class) and, past
// their prefix, what risk_classes lists.
var riskNames = [...]string{
	RiskUnspecified: "RISK_CLASS_UNSPECIFIED",
	RiskRead:        "RISK_CLASS_READ",
	RiskLow:         "RISK_CLASS_LOW",
	RiskWrite:       "RISK_CLASS_WRITE",
	RiskPrivileged:  "RISK_CLASS_PRIVILEGED",
}

// String is the class's name as evidence records it ("RISK_CLASS_WRITE").
// A value outside the table is named unspecified.
func (r Risk) String() string {
	if r < 0 || int(r) >= len(riskNames) {
		return riskNames[RiskUnspecified]
	}
	return riskNames[r]
}

// ParseRisk reads a risk_classes entry: unspecified, read, low, write or
// privileged, in any case.
func ParseRisk(name string) (Risk, bool) {
	want := "RISK_CLASS_" + strings.ToUpper(name)
	for r, n := range riskNames {
		if n == want {
			return Risk(r), true
		}
	}
	return RiskUnspecified, false
}
