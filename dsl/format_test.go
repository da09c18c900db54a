package dsl

import (
	"testing"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			name: "alignment and indentation",
			in: `policy "p" {
match = request.ip != ""
    on_error="deny"
rule "r" {
algorithm = "gcra"
key = request.ip
rate="1/s"
burst = 1
}
}
`,
			want: `policy "p" {
  match    = request.ip != ""
  on_error = "deny"
  rule "r" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1/s"
    burst     = 1
  }
}
`,
		},
		{
			name: "blank lines",
			in: `

# leading comment


locals {

  a = 1


  b = 2

}



policy "p" {
  rule "r" {
    algorithm = "gcra"

  }
}


`,
			want: `# leading comment

locals {
  a = 1

  b = 2
}

policy "p" {
  rule "r" {
    algorithm = "gcra"
  }
}
`,
		},
		{
			name: "comments and heredocs are kept",
			in: `locals {
  # what it is
  doc = <<EOT


  indented text, blank lines kept
EOT
  /* block
     comment */
  x = 1 // trailing
}
`,
			want: `locals {
  # what it is
  doc = <<EOT


  indented text, blank lines kept
EOT
  /* block
     comment */
  x = 1 // trailing
}
`,
		},
		{
			name: "final newline",
			in:   `locals { a = 1 }`,
			want: "locals { a = 1 }\n",
		},
		{
			name: "empty",
			in:   "\n\n",
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diags := Format("f.hcl", []byte(tt.in))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if string(got) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			again, _ := Format("f.hcl", got)
			if string(again) != string(got) {
				t.Errorf("not idempotent:\n%s", again)
			}
		})
	}
}

func TestFormatRefusesInvalid(t *testing.T) {
	out, diags := Format("f.hcl", []byte("policy \"p\" {\n  match = \n"))
	if !diags.HasErrors() || out != nil {
		t.Fatalf("Format of an invalid file: %q, %v", out, diags)
	}
	if diags[0].Subject == nil || diags[0].Subject.Filename != "f.hcl" {
		t.Errorf("diagnostic without a location: %v", diags[0])
	}
}
